// A compound assignment whose l-value calls a function evaluates it once (opassign2-bmv2.p4's
// `s[postincr(i) & 7].x |= f`): `a op= b` reads and writes the same `a`, and a call in `b` runs after
// the l-value's, reading what it left.
#include <core.p4>
#include <v1model.p4>

header h_t { bit<8> i; }
header w_t { bit<8> x; }
struct headers_t { h_t h; w_t[4] w; }
struct meta_t { }

parser CParser(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.h);
        pkt.extract(hdr.w.next);
        pkt.extract(hdr.w.next);
        pkt.extract(hdr.w.next);
        pkt.extract(hdr.w.next);
        transition accept;
    }
}

bit<8> postincr(inout bit<8> v) {
    bit<8> old = v;
    v = v + 1;
    return old;
}

control CVerify(inout headers_t hdr, inout meta_t meta) { apply { } }

control CIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 2;
        hdr.w[postincr(hdr.h.i) & 3].x |= 0xF0;
        hdr.w[postincr(hdr.h.i) & 3].x += postincr(hdr.h.i);
    }
}

control CEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control CCompute(inout headers_t hdr, inout meta_t meta) { apply { } }
control CDeparser(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr); } }

V1Switch(CParser(), CVerify(), CIngress(), CEgress(), CCompute(), CDeparser()) main;
