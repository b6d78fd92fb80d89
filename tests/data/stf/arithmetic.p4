// P4 arithmetic: bit<W> wraps, |+| and |-| saturate, int<W> is two's complement.
#include <core.p4>
#include <v1model.p4>

header ops_t {
    bit<8> a;
    bit<8> b;
    int<8> sa;
    int<8> sb;
}

header results_t {
    bit<8> add_wrap;
    bit<8> sub_wrap;
    bit<8> add_sat;
    bit<8> sub_sat;
    bit<8> mul_wrap;
    bit<8> shl;
    int<8> sadd_wrap;
    int<8> sadd_sat;
    int<8> ssub_sat;
}

struct headers_t {
    ops_t     ops;
    results_t res;
}
struct meta_t { }

parser AParser(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.ops);
        transition accept;
    }
}

control AVerify(inout headers_t hdr, inout meta_t meta) { apply { } }

control AIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        hdr.res.setValid();
        hdr.res.add_wrap = hdr.ops.a + hdr.ops.b;
        hdr.res.sub_wrap = hdr.ops.a - hdr.ops.b;
        hdr.res.add_sat = hdr.ops.a |+| hdr.ops.b;
        hdr.res.sub_sat = hdr.ops.a |-| hdr.ops.b;
        hdr.res.mul_wrap = hdr.ops.a * hdr.ops.b;
        hdr.res.shl = hdr.ops.a << 4;
        hdr.res.sadd_wrap = hdr.ops.sa + hdr.ops.sb;
        hdr.res.sadd_sat = hdr.ops.sa |+| hdr.ops.sb;
        hdr.res.ssub_sat = hdr.ops.sa |-| hdr.ops.sb;
        sm.egress_spec = 2;
    }
}

control AEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control ACompute(inout headers_t hdr, inout meta_t meta) { apply { } }

control ADeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.ops);
        pkt.emit(hdr.res);
    }
}

V1Switch(AParser(), AVerify(), AIngress(), AEgress(), ACompute(), ADeparser()) main;
