// Annotations as P4Info carries them: structured ones (`@a[k=v]`, `@a[v, ...]`, `@a[]`) on a table,
// an action, a match field and a parameter; free-form bodies (any balanced tokens) and expression
// bodies, which P4Info spells token by token; and digests of generic structs (p4c names S<bit<8>>
// S_bit8).
#include <core.p4>
#include <v1model.p4>

header h_t { bit<8> a; bit<8> b; bit<16> c; }
struct headers { h_t h; }
struct pair_t<A, B> { A first; B second; }
struct box_t<T> { T inner; }
struct meta_t { }

parser P(packet_in p, out headers hdr, inout meta_t m, inout standard_metadata_t sm) {
    state start { p.extract(hdr.h); transition accept; }
}
control VC(inout headers hdr, inout meta_t m) { apply { } }
control I(inout headers hdr, inout meta_t m, inout standard_metadata_t sm) {
    @owner["team", 7, true] @limits[rate = 100, unit = "pps", strict = false] @empty[]
    @free(this is ; free text (with { nested } parens)) @expr(1+2) @call(f(x)[1], "s")
    action set(@range[lo = 0, hi = 15] bit<8> v) { hdr.h.b = v; }
    action learn() {
        digest(1, (pair_t<bit<8>, bit<16>>){ first = hdr.h.a, second = hdr.h.c });
        box_t<pair_t<bit<8>, bit<8>>> nested = { inner = { first = hdr.h.a, second = hdr.h.b } };
        digest(2, nested);
    }
    @tier[1] @note(keep these, in sync)
    table t {
        key = { hdr.h.a: exact @format["hex"]; }
        actions = { set; learn; }
    }
    apply { t.apply(); }
}
control E(inout headers hdr, inout meta_t m, inout standard_metadata_t sm) { apply { } }
control CC(inout headers hdr, inout meta_t m) { apply { } }
control D(packet_out p, in headers hdr) { apply { p.emit(hdr.h); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
