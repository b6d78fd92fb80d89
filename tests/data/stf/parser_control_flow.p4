// `if` statements in parser states (p4c turns them into states, as the front end's parser_ifs
// pass does): an if/else-if/else chain, an if nested in a branch, an if without else, and
// statements after them, which run whichever branch was taken; a parser-level variable whose
// initializer calls a function (it runs first in the start state, as p4c's MoveInitializers has it).
#include <core.p4>
#include <v1model.p4>

header h_t { bit<8> kind; bit<8> a; bit<8> b; bit<8> c; }
struct headers_t { h_t h; }
struct meta_t { }

bit<8> plus_one(in bit<8> x) { return x + 1; }

parser SParser(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    bit<8> step = plus_one((bit<8>)sm.ingress_port);  // packets come in on port 0: step is 1
    state start {
        pkt.extract(hdr.h);
        if (hdr.h.kind == 1) {
            hdr.h.a = 10;
        } else if (hdr.h.kind == 2) {
            hdr.h.a = 20;
            if (hdr.h.c == 0) { hdr.h.c = 5; }
        } else {
            hdr.h.a = 30;
        }
        if (hdr.h.b > 100) { hdr.h.b = 100; }
        hdr.h.c = hdr.h.c + step;
        transition accept;
    }
}

control SVerify(inout headers_t hdr, inout meta_t meta) { apply { } }
control SIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { sm.egress_spec = 1; } }
control SEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control SCompute(inout headers_t hdr, inout meta_t meta) { apply { } }
control SDeparser(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.h); } }

V1Switch(SParser(), SVerify(), SIngress(), SEgress(), SCompute(), SDeparser()) main;
