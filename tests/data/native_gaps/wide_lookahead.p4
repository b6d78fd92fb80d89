// Lookaheads wider than 128 bits for tests/test_native_lowered_gaps.py: a select on a 168-bit
// lookahead (exact and masked cases, a default), a 200-bit lookahead into a header field and a
// 160-bit one into metadata (the ingress copies it into the packet), a header read by lookahead.
#include <core.p4>
#include <v1model.p4>

header ethernet_t { bit<48> dst; bit<48> src; bit<16> ether_type; }
header probe_t { bit<8> kind; bit<160> body; }
header peek_t { bit<200> ahead; bit<160> meta_copy; bit<8> path; }
header pair_t { bit<4> a; bit<136> b; bit<4> c; }
struct headers_t { ethernet_t eth; peek_t peek; pair_t pair; probe_t probe; }
struct meta_t { bit<160> ahead; bit<8> path; }

parser WlParser(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.eth);
        hdr.peek.setValid();
        hdr.peek.ahead = pkt.lookahead<bit<200>>();
        meta.ahead = pkt.lookahead<bit<160>>();
        hdr.pair = pkt.lookahead<pair_t>();
        transition select(pkt.lookahead<bit<168>>()) {
            0x01_00112233445566778899aabbccddeeff00112233: exact_hit;
            0x02_000000000000ffffffffffffffff000000000000 &&& 0xff_000000000000ffffffffffffffff000000000000: masked;
            0x00_00000000000000000000000000000000000000ff &&& 0x00_00000000000000000000000000000000000000ff: low_byte;
            default: other;
        }
    }
    state exact_hit { meta.path = 1; transition parse_probe; }
    state masked { meta.path = 2; transition parse_probe; }
    state low_byte { meta.path = 3; transition parse_probe; }
    state other { meta.path = 4; transition parse_probe; }
    state parse_probe { pkt.extract(hdr.probe); transition accept; }
}

control NoVerify(inout headers_t hdr, inout meta_t meta) { apply { } }

control WlIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        hdr.peek.meta_copy = meta.ahead;
        hdr.peek.path = meta.path;
    }
}

control NoEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control NoCompute(inout headers_t hdr, inout meta_t meta) { apply { } }

control WlDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.eth);
        pkt.emit(hdr.peek);
        pkt.emit(hdr.pair);
        pkt.emit(hdr.probe);
    }
}

V1Switch(WlParser(), NoVerify(), WlIngress(), NoEgress(), NoCompute(), WlDeparser()) main;
