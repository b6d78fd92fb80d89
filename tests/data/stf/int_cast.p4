// A run-time value cast to `int` (parser-unroll-test1.p4's shape): the spec has no run-time int, p4c
// 1.2.5.16 accepts it anyway and its BMv2 back end writes `x & 0`, so BMv2 computes 0 for the cast.
// The embedded target computes the same (and warns). A constant cast to int keeps its value (int<W>'s signed).
#include <core.p4>
#include <v1model.p4>

const bit<4> FIVE = 5;
const int<4> MINUS_ONE = -1;
header h_t { bit<8> a; bit<8> b; bit<16> c; bit<8> k; }
struct headers_t { h_t h; }
struct meta_t { int<32> i; }

parser TParser(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.h);
        meta.i = (int<32>)(bit<32>)hdr.h.a;
        meta.i = (int<32>)((int)meta.i + 2);
        transition accept;
    }
}

control TVerify(inout headers_t hdr, inout meta_t meta) { apply { } }

control TIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        hdr.h.b = (bit<8>)((int)hdr.h.b + 1);
        hdr.h.c = (bit<16>)(bit<32>)meta.i + hdr.h.c;
        hdr.h.k = (bit<8>)((int)FIVE + (int)MINUS_ONE) + hdr.h.k;
    }
}

control TEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control TCompute(inout headers_t hdr, inout meta_t meta) { apply { } }

control TDeparser(packet_out pkt, in headers_t hdr) {
    apply { pkt.emit(hdr.h); }
}

V1Switch(TParser(), TVerify(), TIngress(), TEgress(), TCompute(), TDeparser()) main;
