// A parser select on two 128-bit fields and an 8-bit one (a 264-bit key: its parts straddle 64-bit
// words) with exact and masked cases, a range, a default and a value set of such keys, for
// tests/test_native_lowered_gaps.py. The state taken is written into the packet's hop limit.
#include <core.p4>
#include <v1model.p4>

header ethernet_t { bit<48> dst; bit<48> src; bit<16> ether_type; }
header ipv6_t {
    bit<4> version; bit<8> traffic_class; bit<20> flow_label; bit<16> payload_len; bit<8> next_hdr;
    bit<8> hop_limit; bit<128> src; bit<128> dst;
}
struct headers_t { ethernet_t eth; ipv6_t ipv6; }
struct flow_t { bit<128> src; bit<128> dst; bit<8> next_hdr; }
struct meta_t { bit<8> path; }

parser WsParser(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    value_set<flow_t>(4) flows;
    state start {
        pkt.extract(hdr.eth);
        transition select(hdr.eth.ether_type) {
            0x86dd: parse_ipv6;
            default: accept;
        }
    }
    state parse_ipv6 {
        pkt.extract(hdr.ipv6);
        transition select(hdr.ipv6.src, hdr.ipv6.dst, hdr.ipv6.next_hdr) {
            (0x20010db8000000000000000000000001, 0x20010db8000000000000000000000002, 17): exact_hit;
            (0x20010db8000000000000000000000001 &&& 0xffffffffffffffff0000000000000000,
             0xfe800000000000000000000000000000 &&& 0xffc00000000000000000000000000000, 6): src_prefix;
            (_, 0x000000000000000100000000000000ff &&& 0x00000000000000ff00000000ffffffff, _): dst_bits;
            (0x0000000000000000ffffffff00000000 &&& 0x00000000ffffffffffffffff00000000, _, 0x3a): straddle;
            (_, _, 0x80 .. 0x84): in_range;
            flows: in_set;
            default: other;
        }
    }
    state exact_hit { meta.path = 1; transition accept; }
    state src_prefix { meta.path = 2; transition accept; }
    state dst_bits { meta.path = 3; transition accept; }
    state straddle { meta.path = 4; transition accept; }
    state in_set { meta.path = 5; transition accept; }
    state in_range { meta.path = 7; transition accept; }
    state other { meta.path = 6; transition accept; }
}

control NoVerify(inout headers_t hdr, inout meta_t meta) { apply { } }

control WsIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        if (hdr.ipv6.isValid()) {
            sm.egress_spec = 2;
            hdr.ipv6.hop_limit = meta.path;
        }
    }
}

control NoEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control NoCompute(inout headers_t hdr, inout meta_t meta) { apply { } }

control WsDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.eth);
        pkt.emit(hdr.ipv6);
    }
}

V1Switch(WsParser(), NoVerify(), WsIngress(), NoEgress(), NoCompute(), WsDeparser()) main;
