// A range match on a 96-bit key (and an exact one beside it) for tests/test_native_lowered_gaps.py.
#include <core.p4>
#include <v1model.p4>

header ethernet_t { bit<48> dst; bit<48> src; bit<16> ether_type; }
header wide_t { bit<96> addr; bit<8> kind; bit<8> tag; }
struct headers_t { ethernet_t eth; wide_t w; }
struct meta_t { }

parser WrParser(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.eth);
        pkt.extract(hdr.w);
        transition accept;
    }
}

control NoVerify(inout headers_t hdr, inout meta_t meta) { apply { } }

control WrIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    action send(bit<9> port, bit<8> tag) {
        sm.egress_spec = port;
        hdr.w.tag = tag;
    }
    action drop() { mark_to_drop(sm); }
    table classify {
        key = { hdr.w.addr: range; hdr.w.kind: exact; }
        actions = { send; drop; }
        default_action = drop();
    }
    apply { classify.apply(); }
}

control NoEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control NoCompute(inout headers_t hdr, inout meta_t meta) { apply { } }

control WrDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.eth);
        pkt.emit(hdr.w);
    }
}

V1Switch(WrParser(), NoVerify(), WrIngress(), NoEgress(), NoCompute(), WrDeparser()) main;
