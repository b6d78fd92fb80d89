// A digest of fields wider than 64 bits (128 and 72) beside a narrow one, for
// tests/test_native_lowered_gaps.py.
#include <core.p4>
#include <v1model.p4>

header ethernet_t { bit<48> dst; bit<48> src; bit<16> ether_type; }
header wide_t { bit<128> a; bit<72> b; bit<8> c; }
struct headers_t { ethernet_t eth; wide_t w; }
struct meta_t { }
struct learn_t { bit<128> a; bit<8> c; bit<72> b; bit<9> port; }

parser WdParser(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.eth);
        pkt.extract(hdr.w);
        transition accept;
    }
}

control NoVerify(inout headers_t hdr, inout meta_t meta) { apply { } }

control WdIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        digest<learn_t>(1, {hdr.w.a, hdr.w.c, hdr.w.b, sm.ingress_port});
        sm.egress_spec = 1;
    }
}

control NoEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control NoCompute(inout headers_t hdr, inout meta_t meta) { apply { } }

control WdDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.eth);
        pkt.emit(hdr.w);
    }
}

V1Switch(WdParser(), NoVerify(), WdIngress(), NoEgress(), NoCompute(), WdDeparser()) main;
