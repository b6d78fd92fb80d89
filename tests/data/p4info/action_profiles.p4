// Action profiles and selectors as p4c describes them: sizes, the tables that use them,
// @max_group_size / @selector_size_semantics / @max_member_weight (consumed, not copied as
// annotations), other annotations kept, and an implementation built inline in a table, named
// by the @name on the property (not prefixed by the control).
#include <core.p4>
#include <v1model.p4>

header h_t { bit<32> a; bit<32> b; bit<8> c; }
struct headers { h_t h; }
struct meta_t { bit<8> x; }

parser P(packet_in p, out headers hdr, inout meta_t m, inout standard_metadata_t sm) {
    state start { p.extract(hdr.h); transition accept; }
}
control VC(inout headers hdr, inout meta_t m) { apply { } }
control I(inout headers hdr, inout meta_t m, inout standard_metadata_t sm) {
    @max_group_size(8) @selector_size_semantics("sum_of_members") @max_member_weight(4)
    action_selector(HashAlgorithm.crc16, 32w64, 32w16) wide;
    @selector_size_semantics("sum_of_weights") @brief("a selector") @tag(1)
    action_selector(HashAlgorithm.identity, 32w32, 32w8) narrow;
    @max_group_size(5) action_profile(32w16) plain;
    action fwd(bit<9> port) { sm.egress_spec = port; }
    action drop() { mark_to_drop(sm); }
    table a {
        key = { hdr.h.a: exact; hdr.h.b: selector; }
        actions = { fwd; drop; }
        implementation = wide;
    }
    table b {
        key = { hdr.h.b: lpm; hdr.h.c: selector; }
        actions = { fwd; }
        implementation = narrow;
        size = 128;
    }
    table c {
        key = { hdr.h.c: exact; }
        actions = { fwd; drop; }
        implementation = plain;
    }
    table d {
        key = { hdr.h.c: ternary; }
        actions = { drop; }
        implementation = plain;
    }
    table e {
        key = { hdr.h.a: exact; }
        actions = { fwd; }
        @name("inline_profile") implementation = action_profile(32w4);
    }
    apply { a.apply(); b.apply(); c.apply(); d.apply(); e.apply(); }
}
control E(inout headers hdr, inout meta_t m, inout standard_metadata_t sm) { apply { } }
control CC(inout headers hdr, inout meta_t m) { apply { } }
control D(packet_out p, in headers hdr) { apply { p.emit(hdr.h); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
