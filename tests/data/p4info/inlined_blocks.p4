// P4Info of sub-controls inlined two levels deep, as p4c writes it: two inner blocks' same-named
// actions stay two actions, objects are listed where their block's instance was declared, and a key
// on a struct field with @name takes that name (a global ".name" drops what is left of it).
#include <core.p4>
#include <v1model.p4>

header h_t { bit<8> a; bit<8> b; }
struct H {
    @name(".outer") h_t h;
    @name("renamed") h_t g;
}
struct M { bit<8> x; }

parser P(packet_in pk, out H hdr, inout M meta, inout standard_metadata_t sm) {
    state start { pk.extract(hdr.h); pk.extract(hdr.g); transition accept; }
}
control V(inout H hdr, inout M meta) { apply { } }

control First(inout H hdr) {
    action miss() { hdr.h.b = 1; }
    table t1 { key = { hdr.h.a: exact; hdr.g.a: exact; } actions = { miss; } }
    apply { t1.apply(); }
}
control Second(inout H hdr) {
    action miss() { hdr.h.b = 2; }
    table t2 { key = { hdr.g.b: ternary; hdr.h.isValid(): exact; } actions = { miss; } }
    apply { t2.apply(); }
}
control Middle(inout H hdr) {
    First() first;
    Second() second;
    apply { first.apply(hdr); second.apply(hdr); }
}
control I(inout H hdr, inout M meta, inout standard_metadata_t sm) {
    action before() { meta.x = 1; }
    table t0 { key = { meta.x: exact; } actions = { before; } }
    Middle() middle;
    action after() { meta.x = 2; }
    table t3 { key = { meta.x: exact; } actions = { after; } }
    apply { t0.apply(); middle.apply(hdr); t3.apply(); }
}
control E(inout H hdr, inout M meta, inout standard_metadata_t sm) { apply { } }
control C(inout H hdr, inout M meta) { apply { } }
control D(packet_out pk, in H hdr) { apply { pk.emit(hdr.h); pk.emit(hdr.g); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
