// Values wider than 64 bits: arithmetic, comparisons and shifts on 128- and 200-bit fields, signed
// 128-bit values, table keys of 128 bits (exact, lpm) and 200 bits (ternary), action parameters of
// 96 and 128 bits, register cells of 96, 128 and 200 bits. The native engine computes these in engine/wide.h's multi-word integers.
#include <core.p4>
#include <v1model.p4>

header in_t {
    bit<128> a;
    bit<128> b;
    bit<200> c;
    int<128> s;
}

header out_t {
    bit<128> sum;
    bit<128> product;
    bit<128> sat;
    bit<128> shifted;
    int<128> sar;
    bit<200> c2;
    bit<96>  param96;
    bit<128> param128;
    bit<128> acc;
    bit<8>   flags;
}

struct headers_t { in_t i; out_t o; }
struct meta_t { }

parser WParser(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.i);
        transition accept;
    }
}

control WVerify(inout headers_t hdr, inout meta_t meta) { apply { } }

control WIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    action forward(bit<9> port, bit<128> v, bit<96> w) {
        sm.egress_spec = port;
        hdr.o.param128 = v ^ hdr.i.a;
        hdr.o.param96 = w + 1;
    }
    action mark(bit<8> bit_) { hdr.o.flags = hdr.o.flags | bit_; }
    action drop() { mark_to_drop(sm); }
    register<bit<128>>(4) acc;
    register<bit<96>>(2) low96;
    register<bit<200>>(2) last_c;
    table by_a {
        key = { hdr.i.a: exact; }
        actions = { forward; drop; }
        default_action = drop();
    }
    table by_b {
        key = { hdr.i.b: lpm; }
        actions = { mark; NoAction; }
        default_action = NoAction();
    }
    table by_c {
        key = { hdr.i.c: ternary; }
        actions = { mark; NoAction; }
        default_action = NoAction();
    }
    apply {
        hdr.o.setValid();
        hdr.o.sum = hdr.i.a + hdr.i.b;
        hdr.o.product = hdr.i.a * hdr.i.b;
        hdr.o.sat = hdr.i.a |+| hdr.i.b;
        hdr.o.shifted = (hdr.i.a >> 100) | (hdr.i.b << 120);
        hdr.o.sar = hdr.i.s >> 67;
        hdr.o.c2 = hdr.i.c + ((bit<200>)hdr.i.a << 70) - 1;
        hdr.o.flags = 0;
        if (hdr.i.a < hdr.i.b) { hdr.o.flags = hdr.o.flags | 1; }
        if (hdr.i.s < 0) { hdr.o.flags = hdr.o.flags | 2; }
        if (hdr.i.c > 200w0x800000000000000000000000000000000000000000000000) { hdr.o.flags = hdr.o.flags | 4; }
        if (hdr.i.a[127:120] == 0xff) { hdr.o.flags = hdr.o.flags | 8; }
        acc.read(hdr.o.acc, 1);
        acc.write(1, hdr.o.acc + hdr.i.a);
        low96.write(1, hdr.i.a[95:0]);
        bit<200> before;
        last_c.read(before, 0);
        last_c.write(0, before ^ hdr.i.c);
        by_a.apply();
        by_b.apply();
        by_c.apply();
    }
}

control WEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control WCompute(inout headers_t hdr, inout meta_t meta) { apply { } }

control WDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.i);
        pkt.emit(hdr.o);
    }
}

V1Switch(WParser(), WVerify(), WIngress(), WEgress(), WCompute(), WDeparser()) main;
