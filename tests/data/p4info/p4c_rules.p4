// What p4c's front end does to the control plane, which our P4Info must follow:
// - an action only called from another action is inlined: it is not in P4Info;
// - an action the control calls directly keeps no parameters (they are bound to the call's
//   arguments), unless a table uses it too;
// - `X.isValid()` keys are named `X.$valid$`;
// - a branch that can never run (`if (true) ... else ...`) is removed with what it applies;
// - match-field and parameter ids: @id wins, the others take their position (selector keys
//   count), moved up past ids already taken;
// - an action profile no table uses is still described.
#include <core.p4>
#include <v1model.p4>

header h_t { bit<8> f; bit<8> g; bit<16> w; }
struct headers { h_t h; h_t h2; }
struct meta_t { bit<8> x; }

parser P(packet_in p, out headers hdr, inout meta_t m, inout standard_metadata_t sm) {
    state start { p.extract(hdr.h); transition accept; }
}
control VC(inout headers hdr, inout meta_t m) { apply { } }
control I(inout headers hdr, inout meta_t m, inout standard_metadata_t sm) {
    action_profile(32w8) unused_profile;
    action_selector(HashAlgorithm.crc32, 32w16, 32w8) sel;
    action inner(bit<8> v) { hdr.h.f = v; mark_to_drop(sm); }
    action outer() { inner(7); }
    action direct(bit<8> v) { hdr.h.g = v; }
    action both(bit<8> v) { hdr.h.w = (bit<16>)v; }
    action set(@id(3) bit<8> a, bit<8> b, bit<8> c) { hdr.h.f = a; hdr.h.g = b; m.x = c; }
    action never() { hdr.h.f = 0; }
    table t {
        key = {
            hdr.h.isValid(): exact;
            hdr.h2.f: exact @id(1);
            hdr.h.g: ternary;
        }
        actions = { outer; both; set; }
    }
    table s {
        key = {
            hdr.h.g: selector;
            hdr.h.f: exact;
            hdr.h.w: selector;
            hdr.h2.isValid(): exact;
        }
        actions = { set; }
        implementation = sel;
    }
    table dead {
        key = { hdr.h.f: exact; }
        actions = { never; }
    }
    apply {
        t.apply();
        s.apply();
        direct(3);
        both(4);
        if (true) {
            exit;
        } else {
            dead.apply();
        }
    }
}
control E(inout headers hdr, inout meta_t m, inout standard_metadata_t sm) { apply { } }
control CC(inout headers hdr, inout meta_t m) { apply { } }
control D(packet_out p, in headers hdr) { apply { p.emit(hdr.h); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
