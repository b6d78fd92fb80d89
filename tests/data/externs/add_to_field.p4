// simple_switch's add_to_field / subtract_from_field, declared by the program (v1model.p4 has neither), for the
// test-only extern of tests/add_to_field_extern.py: p4c and this target without it refuse the program.
// fields of several widths and signedness, wrapping both ways, by constants and by packet values.
#include <core.p4>
#include <v1model.p4>

extern void add_to_field<T>(inout T field, in T value);
extern void subtract_from_field<T>(inout T field, in T value);

header ethernet_t { bit<48> dst; bit<48> src; bit<16> type; }
header h_t { bit<8> op; bit<8> a; bit<16> b; bit<16> x; int<8> c; bit<4> n; bit<4> m; bit<64> w; }
struct headers_t { ethernet_t eth; h_t h; }
struct meta_t { bit<16> acc; }

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.eth); pkt.extract(hdr.h); transition accept; }
}
control VC(inout headers_t hdr, inout meta_t meta) { apply { } }
control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    action bump(bit<16> by) {
        add_to_field(meta.acc, by);
        add_to_field(hdr.h.b, meta.acc);
    }
    table t {
        key = { hdr.h.op: exact; }
        actions = { bump; NoAction; }
        const entries = { 1: bump(16w0xfff0); 2: bump(16w7); }
        default_action = NoAction();
    }
    apply {
        sm.egress_spec = 1;
        meta.acc = hdr.h.x;
        add_to_field(hdr.h.a, 8w200);
        subtract_from_field(hdr.h.x, hdr.h.b);
        add_to_field(hdr.h.c, -8s100);
        subtract_from_field(hdr.h.n, hdr.h.m);
        add_to_field(hdr.h.w, 64w0xffff_ffff_0000_0001);
        t.apply();
        if (hdr.h.a == 8w0) {
            subtract_from_field(hdr.h.c, 8s1);
        }
    }
}
control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.eth); pkt.emit(hdr.h); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
