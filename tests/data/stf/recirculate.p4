// Recirculation: the packet goes around until it has made three ingress passes;
// a metadata field in field list 0 survives each recirculation.
#include <core.p4>
#include <v1model.p4>

header pass_t {
    bit<8> passes;
    bit<8> loops_seen;
    bit<8> first_port;
}

struct headers_t { pass_t p; }
struct meta_t {
    @field_list(0)
    bit<8> loops;
}

parser CParser(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.p);
        transition accept;
    }
}

control CVerify(inout headers_t hdr, inout meta_t meta) { apply { } }

control CIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        if (hdr.p.passes == 0) {
            hdr.p.first_port = (bit<8>) sm.ingress_port;
        }
        hdr.p.passes = hdr.p.passes + 1;
        meta.loops = meta.loops + 1;
        hdr.p.loops_seen = meta.loops;
        sm.egress_spec = 2;
    }
}

control CEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        if (hdr.p.passes < 3) {
            recirculate_preserving_field_list(0);
        }
    }
}

control CCompute(inout headers_t hdr, inout meta_t meta) { apply { } }

control CDeparser(packet_out pkt, in headers_t hdr) {
    apply { pkt.emit(hdr.p); }
}

V1Switch(CParser(), CVerify(), CIngress(), CEgress(), CCompute(), CDeparser()) main;
