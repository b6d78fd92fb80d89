// Indexing a tuple with a constant: a header stack held in a metadata struct's tuple field
// (issue4057.p4's shape, m.s.n[0][1]) and a local tuple variable.
#include <core.p4>
#include <v1model.p4>

header h_t { bit<8> a; bit<8> b; }
header s_t { bit<8> v; }
struct headers_t { h_t h; }
struct inner_t { tuple<s_t[2], bit<8>> n; }
struct meta_t { inner_t s; }

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
        meta.s.n[0][1].setValid();
        meta.s.n[0][1].v = hdr.h.a + 1;
        meta.s.n[1] = hdr.h.b;
        tuple<bit<8>, bit<8>> t = { hdr.h.b, hdr.h.a };
        hdr.h.a = meta.s.n[0][1].v + t[0];
        hdr.h.b = meta.s.n[1] ^ t[1];
    }
}

control TEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control TCompute(inout headers_t hdr, inout meta_t meta) { apply { } }

control TDeparser(packet_out pkt, in headers_t hdr) {
    apply { pkt.emit(hdr.h); }
}

V1Switch(TParser(), TVerify(), TIngress(), TEgress(), TCompute(), TDeparser()) main;
