// Parser value sets the control plane fills: a bit<16> set of EtherTypes that carry a tunnel
// header, and a struct set of (proto, flags) pairs that mark it. Tunnel packets leave on port 2,
// marked ones with mark = 0xbeef; everything else leaves unchanged on port 1.
#include <core.p4>
#include <v1model.p4>

header ethernet_t { bit<48> dst; bit<48> src; bit<16> etherType; }
header tunnel_t { bit<8> proto; bit<8> flags; bit<16> mark; }
struct pair_t { bit<8> proto; bit<8> flags; }
struct headers_t { ethernet_t eth; tunnel_t tun; }
struct meta_t { }

parser VsParser(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    value_set<bit<16>>(4) tunnel_types;
    @name("marking") value_set<pair_t>(2) pairs;
    state start {
        pkt.extract(hdr.eth);
        transition select(hdr.eth.etherType) {
            0x0800: accept;
            tunnel_types: parse_tunnel;
            default: accept;
        }
    }
    state parse_tunnel {
        pkt.extract(hdr.tun);
        transition select(hdr.tun.proto, hdr.tun.flags) {
            pairs: mark;
            default: accept;
        }
    }
    state mark {
        hdr.tun.mark = 0xbeef;
        transition accept;
    }
}

control VsVerify(inout headers_t hdr, inout meta_t meta) { apply { } }

control VsIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply { sm.egress_spec = hdr.tun.isValid() ? 9w2 : 9w1; }
}

control VsEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control VsCompute(inout headers_t hdr, inout meta_t meta) { apply { } }
control VsDeparser(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.eth); pkt.emit(hdr.tun); } }

V1Switch(VsParser(), VsVerify(), VsIngress(), VsEgress(), VsCompute(), VsDeparser()) main;
