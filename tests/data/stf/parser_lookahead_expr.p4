// packet.lookahead() inside an expression: a slice of it as a select key (issue356-bmv2.p4's
// shape) and in an assignment's arithmetic. The parser sets each into a temporary first, as p4c does.
// And a lookahead of a struct holding a header stack (issue2465-bmv2.p4): element by element.
#include <core.p4>
#include <v1model.p4>

header h_t { bit<8> a; bit<8> b; }
header out_t { bit<8> sum; }

struct headers_t { out_t front; h_t h; }
struct meta_t { bit<8> peek; }
struct peek_t { h_t[2] s; }

parser TParser(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        peek_t l = pkt.lookahead<peek_t>();
        meta.peek = pkt.lookahead<bit<16>>()[7:0] + l.s[1].a;
        transition select(pkt.lookahead<bit<16>>()[15:12]) {
            4w0xA: tagged;
            default: plain;
        }
    }
    state tagged {
        pkt.extract(hdr.h);
        hdr.front.setValid();
        hdr.front.sum = meta.peek;
        transition accept;
    }
    state plain {
        pkt.extract(hdr.h);
        transition accept;
    }
}

control TVerify(inout headers_t hdr, inout meta_t meta) { apply { } }
control TIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply { sm.egress_spec = 1; }
}
control TEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control TCompute(inout headers_t hdr, inout meta_t meta) { apply { } }
control TDeparser(packet_out pkt, in headers_t hdr) {
    apply { pkt.emit(hdr.front); pkt.emit(hdr.h); }
}

V1Switch(TParser(), TVerify(), TIngress(), TEgress(), TCompute(), TDeparser()) main;
