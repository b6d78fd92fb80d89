// Loops a client's program may hold. The parser loops three ways: `spin` consumes nothing (simple_switch
// spins on it forever; the engines stop it with ParserTimeout), `stack` fills a header stack until it
// overflows (StackOutOfBounds), `eat` extracts until the packet runs out (PacketTooShort). Ingress writes
// the parser's error into the first byte. Action `a` has an if, which p4c writes as forward jumps.
#include <core.p4>
#include <v1model.p4>

header h_t { bit<8> v; }
struct headers { h_t h; h_t[4] s; }
struct metadata { bit<8> n; }

parser P(packet_in pk, out headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    state start { pk.extract(hdr.h); transition select(hdr.h.v) { 1: spin; 2: stack; 3: eat; default: accept; } }
    state spin { meta.n = meta.n + 1; transition spin; }
    state stack { pk.extract(hdr.s.next); transition stack; }
    state eat { pk.extract(hdr.h); transition eat; }
}
control VC(inout headers hdr, inout metadata meta) { apply { } }
control I(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    action a() { if (hdr.h.v == 9) { hdr.h.v = 7; } else { hdr.h.v = 8; } sm.egress_spec = 1; }
    table t { key = { hdr.h.v: exact; } actions = { a; } default_action = a(); }
    apply {
        t.apply();
        if (sm.parser_error == error.ParserTimeout) { hdr.h.v = 0xe5; }
        else if (sm.parser_error == error.StackOutOfBounds) { hdr.h.v = 0xe3; }
        else if (sm.parser_error == error.PacketTooShort) { hdr.h.v = 0xe1; }
    }
}
control E(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers hdr, inout metadata meta) { apply { } }
control D(packet_out pk, in headers hdr) { apply { pk.emit(hdr.h); pk.emit(hdr.s); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
