// A header with a struct field whose fields are structs (p4c's issue383-bmv2 and stack-bvec-bmv2):
// members at every depth read and written, a whole nested struct copied, in a header and in an
// element of a local header stack; a nested struct compared with a constant struct (issue1210).
#include <core.p4>
#include <v1model.p4>

struct alt_t { bit<1> valid; bit<7> port; }
struct row_t { alt_t alt0; alt_t alt1; }
header h_t { bit<8> f; row_t row; }
struct headers_t { h_t h; }
const alt_t PORT_6 = { valid = 0, port = 6 };
struct meta_t { }

parser SParser(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.h); transition accept; }
}

control SVerify(inout headers_t hdr, inout meta_t meta) { apply { } }

control SIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        h_t[1] tmp;
        tmp[0].setValid();
        tmp[0].row.alt1.valid = 1;
        hdr.h.row.alt1 = hdr.h.row.alt0;
        hdr.h.row.alt0.port = hdr.h.row.alt0.port + 1;
        hdr.h.f = (bit<8>)hdr.h.row.alt1.port;
        hdr.h.row.alt1.valid = tmp[0].row.alt1.valid;
        sm.egress_spec = 1;
        if (hdr.h.row.alt0 == PORT_6) { sm.egress_spec = 2; }
    }
}

control SEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control SCompute(inout headers_t hdr, inout meta_t meta) { apply { } }
control SDeparser(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.h); } }

V1Switch(SParser(), SVerify(), SIngress(), SEgress(), SCompute(), SDeparser()) main;
