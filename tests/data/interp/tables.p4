/* Tables and stateful externs: a ternary table with a direct counter, const entries with
 * `switch (t.apply().action_run)`, hit/miss, an indirect counter per port, a register,
 * a range table, and `exit`. */
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8>  k;
    bit<8>  t;
    bit<8>  r1;
    bit<8>  r2;
    bit<16> len;
    bit<8>  prev;
}

struct metadata {
    bit<8> tag;
}

struct headers {
    h_t h;
}

parser P(packet_in packet, out headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    state start {
        packet.extract(hdr.h);
        transition accept;
    }
}

control VC(inout headers hdr, inout metadata meta) { apply { } }

control Ing(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    direct_counter(CounterType.packets_and_bytes) tern_hits;
    counter(8, CounterType.packets_and_bytes) port_ctr;
    register<bit<8>>(4) last_k;

    action mark(bit<8> v) { hdr.h.r1 = v; }
    action miss_act() { hdr.h.r1 = 0xEE; }
    action set_tag(bit<8> tag) { meta.tag = tag; }
    action size_class(bit<8> c) { hdr.h.prev = c; }

    table tern {
        key = { hdr.h.k: ternary; }
        actions = { mark; miss_act; }
        default_action = miss_act();
        counters = tern_hits;
    }
    table cls {
        key = { hdr.h.t: exact; }
        actions = { set_tag; NoAction; }
        const entries = {
            1: set_tag(10);
            2: set_tag(20);
        }
        default_action = NoAction();
    }
    table by_len {
        key = { hdr.h.len: range; }
        actions = { size_class; NoAction; }
        default_action = NoAction();
    }

    apply {
        port_ctr.count((bit<32>)sm.ingress_port);
        if (hdr.h.k == 0xFF) {
            sm.egress_spec = 2;
            exit;
        }
        if (tern.apply().hit) {
            hdr.h.r2 = 1;
        } else {
            hdr.h.r2 = 2;
        }
        switch (cls.apply().action_run) {
            set_tag: { hdr.h.r2 = hdr.h.r2 + meta.tag; }
            NoAction: { hdr.h.r2 = hdr.h.r2 + 100; }
        }
        bit<8> prev;
        last_k.read(prev, 0);
        last_k.write(0, hdr.h.k);
        hdr.h.t = prev;
        by_len.apply();
        sm.egress_spec = 1;
    }
}

control Eg(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) { apply { } }

control CC(inout headers hdr, inout metadata meta) { apply { } }

control D(packet_out packet, in headers hdr) {
    apply { packet.emit(hdr.h); }
}

V1Switch(P(), VC(), Ing(), Eg(), CC(), D()) main;
