// A parser loop over a header stack at a local index, in the shape of p4c's parser-unroll-test1.p4: with
// --loopsUnroll (given in the source, as p4c's samples do) p4c copies the loop's state once per value of
// `index` so that every stack index is a constant (BMv2 has no extract at a run-time index), and an index
// past the stack goes to a state failing with error.StackOutOfBounds. p4c's unroller takes `(int)index` as
// index's value (0, 1, 2, ...) while BMv2 computes `(int)index` as 0 at run time: `index` itself is 1 after
// every hop, as tail.seen shows.
#include <core.p4>
#include <v1model.p4>

@command_line("--loopsUnroll")
header eth_t { bit<48> dst; bit<48> src; bit<16> type; }
header hop_t { bit<1> bos; bit<7> port; }
header tail_t { bit<8> seen; }
struct headers_t { eth_t eth; hop_t[3] hops; tail_t tail; }
struct meta_t { bit<8> seen; }

parser TParser(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    int<32> index;
    state start {
        index = 0;
        pkt.extract(hdr.eth);
        transition select(hdr.eth.type) {
            0x1234: parse_hop;
            default: accept;
        }
    }
    state parse_hop {
        pkt.extract(hdr.hops[index]);
        index = (int<32>)((int)index + 1);
        hdr.hops[index - 1].port = hdr.hops[index - 1].port + 1;
        transition select(hdr.hops[index - 1].bos) {
            1: parse_tail;
            default: parse_hop;
        }
    }
    state parse_tail {
        pkt.extract(hdr.tail);
        meta.seen = (bit<8>)(bit<32>)index;
        transition accept;
    }
}

control TVerify(inout headers_t hdr, inout meta_t meta) { apply { } }

control TIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = sm.parser_error == error.StackOutOfBounds ? 9w2 : 9w1;
        if (hdr.tail.isValid()) {
            hdr.tail.seen = meta.seen;
        }
    }
}

control TEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control TCompute(inout headers_t hdr, inout meta_t meta) { apply { } }

control TDeparser(packet_out pkt, in headers_t hdr) {
    apply { pkt.emit(hdr); }
}

V1Switch(TParser(), TVerify(), TIngress(), TEgress(), TCompute(), TDeparser()) main;
