// Stacks of header unions reached through a run-time index (invalid-hdr-warnings6.p4's u[i]): making
// a member valid invalidates its siblings at that index, and a union read through one is copied with
// every member's validity. p4c 1.2.5.16 crashes on this program (SIGSEGV), so only our two engines
// run it (test_stf_programs.py); union_stack_copy.p4 runs the constant-index part against BMv2.
#include <core.p4>
#include <v1model.p4>

header h_t { bit<8> i; bit<8> x; }
header a_t { bit<8> v; }
header b_t { bit<16> v; }
header_union u_t { a_t a; b_t b; }
struct headers_t { h_t h; a_t outa; b_t outb; }
struct meta_t { }

parser TParser(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.h);
        transition accept;
    }
}

control TVerify(inout headers_t hdr, inout meta_t meta) { apply { } }

control TIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    u_t[2] s;
    u_t[2] t;
    apply {
        sm.egress_spec = 1;
        bit<1> i = hdr.h.i[0:0];
        s[i].b.setValid();
        s[i].a.setValid();  // invalidates s[i].b
        s[i].a.v = hdr.h.x;
        s[i ^ 1].b.setValid();
        s[i ^ 1].b.v = 16w0xBEEF;
        t = s;
        s[0] = t[i];
        if (s[0].a.isValid()) {
            hdr.outa = s[0].a;
        }
        if (t[1].b.isValid()) {
            hdr.outb = t[1].b;
        }
    }
}

control TEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control TCompute(inout headers_t hdr, inout meta_t meta) { apply { } }

control TDeparser(packet_out pkt, in headers_t hdr) {
    apply { pkt.emit(hdr.h); pkt.emit(hdr.outa); pkt.emit(hdr.outb); }
}

V1Switch(TParser(), TVerify(), TIngress(), TEgress(), TCompute(), TDeparser()) main;
