// A stack of header unions assigned whole (wrong-warning.p4's au1 = au1b) copies every union with its
// members' validity; a member made valid invalidates its siblings. (A run-time index into such a
// stack is union_stack_index.p4: p4c crashes on it, so it runs on our engines only.)
#include <core.p4>
#include <v1model.p4>

header h_t { bit<8> i; bit<8> x; }
header a_t { bit<8> v; }
header b_t { bit<16> v; }
header_union u_t { a_t a; b_t b; }
struct headers_t { h_t h; a_t outa; b_t outb; u_t[2] s; u_t[2] t; }
struct meta_t { }

parser TParser(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.h);
        transition accept;
    }
}

control TVerify(inout headers_t hdr, inout meta_t meta) { apply { } }

control TIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        hdr.s[0].b.setValid();
        hdr.s[0].b.v = 16w0xBEEF;
        if (hdr.h.i == 1) {
            hdr.s[0].a.setValid();  // invalidates s[0].b
            hdr.s[0].a.v = hdr.h.x;
        }
        hdr.s[1].b.setValid();
        hdr.s[1].b.v = (bit<16>)hdr.h.x;
        hdr.t = hdr.s;
        if (hdr.t[0].a.isValid()) {
            hdr.outa = hdr.t[0].a;
        }
        if (hdr.t[0].b.isValid()) {
            hdr.outb = hdr.t[0].b;
        }
        if (hdr.t[1].b.isValid()) {
            hdr.h.i = hdr.t[1].b.v[7:0];
        }
    }
}

control TEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control TCompute(inout headers_t hdr, inout meta_t meta) { apply { } }

control TDeparser(packet_out pkt, in headers_t hdr) {
    apply { pkt.emit(hdr.h); pkt.emit(hdr.outa); pkt.emit(hdr.outb); }
}

V1Switch(TParser(), TVerify(), TIngress(), TEgress(), TCompute(), TDeparser()) main;
