// Table keys and bound action arguments that call something: a key that is another table's hit
// (issue2362-bmv2.p4's shape), a key that calls a function with an inout argument (issue2258-bmv2.p4),
// and an action bound to two calls of such a function (issue2321.p4). Each call runs once per
// application, in order, and its side effect shows in the packet.
#include <core.p4>
#include <v1model.p4>

header h_t { bit<8> a; bit<8> b; bit<8> c; bit<8> d; }
struct headers_t { h_t h; }
struct meta_t { }

bit<8> bump(inout bit<8> x) {
    x = x + 1;
    return x << 1;
}

parser TParser(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.h);
        transition accept;
    }
}

control TVerify(inout headers_t hdr, inout meta_t meta) { apply { } }

control TIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    action set_c(bit<8> v) { hdr.h.c = v; }
    action add_to_d(in bit<8> y, in bit<8> z) { hdr.h.d = y + z; }
    table probe {
        key = { hdr.h.a: exact; }
        actions = { NoAction; }
    }
    table by_hit {
        key = { probe.apply().hit: exact @name("probe_hit"); }
        actions = { set_c; }
    }
    table by_call {
        key = { bump(hdr.h.b): exact @name("bumped"); }
        actions = { add_to_d(bump(hdr.h.a), bump(hdr.h.a)); NoAction; }
        default_action = NoAction();
    }
    apply {
        sm.egress_spec = 1;
        by_hit.apply();
        by_call.apply();
    }
}

control TEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control TCompute(inout headers_t hdr, inout meta_t meta) { apply { } }

control TDeparser(packet_out pkt, in headers_t hdr) {
    apply { pkt.emit(hdr.h); }
}

V1Switch(TParser(), TVerify(), TIngress(), TEgress(), TCompute(), TDeparser()) main;
