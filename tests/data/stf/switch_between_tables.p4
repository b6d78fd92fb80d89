// A switch on a value whose cases apply tables (issue3374.p4's shape): BMv2 runs it as conditionals.
// Labels falling through share a body; the default case runs when no label matches.
#include <core.p4>
#include <v1model.p4>

header h_t { bit<8> a; bit<8> b; bit<8> c; bit<8> d; }
struct headers_t { h_t h; }
struct meta_t { }

parser TParser(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.h);
        transition accept;
    }
}

control TVerify(inout headers_t hdr, inout meta_t meta) { apply { } }

control TIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    action set_c(bit<8> v) { hdr.h.c = v; }
    table one {
        key = { hdr.h.b: exact; }
        actions = { set_c; NoAction; }
        default_action = NoAction();
    }
    table two {
        key = { hdr.h.b: exact; }
        actions = { set_c; NoAction; }
        default_action = NoAction();
    }
    apply {
        sm.egress_spec = 1;
        switch (hdr.h.a) {
            1: { one.apply(); }
            2:
            3: {
                if (hdr.h.b != 0) {
                    two.apply();
                }
            }
            default: { hdr.h.d = 0xEE; }
        }
    }
}

control TEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control TCompute(inout headers_t hdr, inout meta_t meta) { apply { } }

control TDeparser(packet_out pkt, in headers_t hdr) {
    apply { pkt.emit(hdr.h); }
}

V1Switch(TParser(), TVerify(), TIngress(), TEgress(), TCompute(), TDeparser()) main;
