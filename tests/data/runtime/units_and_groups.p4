// What BMv2's JSON does not say and P4Info does: counter units (packets-only, bytes-only) and an action
// selector's @max_group_size. The State must have them whether the program comes from our front end or
// from p4c's JSON with its P4Info.
#include <core.p4>
#include <v1model.p4>

header h_t { bit<32> a; bit<8> c; }
struct headers { h_t h; }
struct meta_t { }

parser P(packet_in p, out headers hdr, inout meta_t m, inout standard_metadata_t sm) {
    state start { p.extract(hdr.h); transition accept; }
}
control VC(inout headers hdr, inout meta_t m) { apply { } }
control I(inout headers hdr, inout meta_t m, inout standard_metadata_t sm) {
    counter(32w4, CounterType.packets) pkts;
    direct_counter(CounterType.bytes) hits;
    @max_group_size(3) action_selector(HashAlgorithm.crc16, 32w16, 32w10) sel;
    action fwd(bit<9> port) { sm.egress_spec = port; }
    action counted_fwd(bit<9> port) { sm.egress_spec = port; hits.count(); }
    table groups {
        key = { hdr.h.a: exact; hdr.h.c: selector; }
        actions = { fwd; }
        implementation = sel;
    }
    table counted {
        key = { hdr.h.c: exact; }
        actions = { counted_fwd; }
        counters = hits;
    }
    apply { pkts.count((bit<32>)hdr.h.c[1:0]); groups.apply(); counted.apply(); }
}
control E(inout headers hdr, inout meta_t m, inout standard_metadata_t sm) { apply { } }
control CC(inout headers hdr, inout meta_t m) { apply { } }
control D(packet_out p, in headers hdr) { apply { p.emit(hdr.h); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
