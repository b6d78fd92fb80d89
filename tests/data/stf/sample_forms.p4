// Forms found in p4c's sample programs that p4c 1.2.5 compiles for BMv2 (issue 19 item 5):
// a header field named `type` assigned a named constant, hash() over computed data (p4c stores
// each computed item in a temporary first), a table applied in both branches of an if (one node in
// BMv2's graph: both places go on to the same statement), and V1Switch's arguments given by name.
#include <core.p4>
#include <v1model.p4>

const bit<8> ECHO = 8;

header msg_t {
    bit<8> type;
    bit<8> code;
    bit<8> mix;
    bit<8> lo;
}

struct headers_t { msg_t m; }
struct meta_t { }

parser MyParser(packet_in pk, out headers_t h, inout meta_t m, inout standard_metadata_t sm) {
    state start { pk.extract(h.m); transition accept; }
}

control MyVerify(inout headers_t h, inout meta_t m) { apply { } }

control MyIngress(inout headers_t h, inout meta_t m, inout standard_metadata_t sm) {
    action flip() {
        if (h.m.type == ECHO) { h.m.type = 0; } else { h.m.type = ECHO; }
    }
    action bump(bit<8> v) { h.m.code = h.m.code + v; }
    table count_up {
        key = { h.m.mix : exact; }
        actions = { bump; }
        const entries = { 0xED : bump(1); }
        default_action = bump(2);
    }
    apply {
        flip();
        bit<8> x;
        hash(x, HashAlgorithm.identity, 8w0, { h.m.code ^ 8w0xFF }, 16w256);
        bit<8> y;
        hash(y, HashAlgorithm.identity, 8w0, { h.m.code[3:0], h.m.lo[7:4] }, 16w256);
        h.m.mix = x;
        h.m.lo = y;
        if (h.m.lo == 0x2A) { count_up.apply(); } else { count_up.apply(); }
        sm.egress_spec = 2;
    }
}

control MyEgress(inout headers_t h, inout meta_t m, inout standard_metadata_t sm) { apply { } }
control MyCompute(inout headers_t h, inout meta_t m) { apply { } }
control MyDeparser(packet_out pk, in headers_t h) { apply { pk.emit(h.m); } }

V1Switch(dep = MyDeparser(), p = MyParser(), ig = MyIngress(), eg = MyEgress(), vr = MyVerify(), ck = MyCompute()) main;
