// Parameters of type int, known once inlined (issue3394.p4's shape, which p4c takes): a sub-control's directionless
// int, cast to the width each use needs as p4c casts it (`b == a` is `b == (bit<8>)a`), and a function's.
#include <core.p4>
#include <v1model.p4>

header h_t { bit<8> a; bit<8> b; }
struct headers_t { h_t h; }
struct meta_t { }

parser TParser(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.h); transition accept; }
}

control Bump(int a, inout bit<8> b) {
    apply {
        if (b == a) {
            b = a + 8w1;
        } else {
            b = 1 + a;
        }
    }
}

bit<8> plus(in bit<8> x, int k) { return x + k; }

control TVerify(inout headers_t hdr, inout meta_t meta) { apply { } }

control TIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        Bump.apply(3, hdr.h.a);
        hdr.h.b = plus(hdr.h.b, 16);
    }
}

control TEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control TCompute(inout headers_t hdr, inout meta_t meta) { apply { } }
control TDeparser(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.h); } }

V1Switch(TParser(), TVerify(), TIngress(), TEgress(), TCompute(), TDeparser()) main;
