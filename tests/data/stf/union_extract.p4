// An extract into a header union member invalidates the union's other members, in a union and in a
// stack of unions, as BMv2 does on p4c's JSON (which writes the extract alone).
#include <core.p4>
#include <v1model.p4>

header t_t { bit<8> kind; }
header a_t { bit<8> v; }
header b_t { bit<16> v; }
header_union u_t { a_t a; b_t b; }
struct headers_t { t_t t; u_t u; u_t[2] s; }
struct meta_t { }

parser TParser(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.t);
        hdr.u.b.setValid();
        hdr.u.b.v = 16w0xBEEF;
        hdr.s[0].b.setValid();
        hdr.s[0].b.v = 16w0xCAFE;
        transition select(hdr.t.kind) {
            1: one;
            2: two;
            default: accept;
        }
    }
    state one {
        pkt.extract(hdr.u.a);
        pkt.extract(hdr.s.next.a);
        transition accept;
    }
    state two {
        pkt.extract(hdr.s.next.a);
        pkt.extract(hdr.s.next.a);
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
    apply { pkt.emit(hdr); }
}

V1Switch(TParser(), TVerify(), TIngress(), TEgress(), TCompute(), TDeparser()) main;
