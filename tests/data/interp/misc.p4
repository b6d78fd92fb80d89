/* Statements and externs: actions with inout/in params, struct/list/header assignment,
 * slice assignment, hash, switch on a value with fall-through, setValid/setInvalid,
 * stack push_front, log_msg and assert. */
#include <core.p4>
#include <v1model.p4>

header a_t {
    bit<8>  x;
    bit<8>  y;
    bit<16> h16;
    bit<32> h32;
    bit<8>  sw;
    bit<8>  s;
}

header b_t {
    bit<8> v;
}

struct pair_t {
    bit<8> p;
    bit<8> q;
}

struct metadata {
    pair_t pr;
    pair_t pr2;
}

struct headers {
    a_t    a;
    b_t    b;
    b_t    b2;
    b_t[2] st;
}

parser P(packet_in packet, out headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    state start {
        packet.extract(hdr.a);
        transition accept;
    }
}

control VC(inout headers hdr, inout metadata meta) { apply { } }

control Ing(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    action swap(inout bit<8> l, inout bit<8> r) {
        bit<8> t = l;
        l = r;
        r = t;
    }
    action addto(inout bit<8> acc, in bit<8> v) {
        acc = acc + v;
    }
    apply {
        swap(hdr.a.x, hdr.a.y);
        meta.pr = { hdr.a.x, hdr.a.y };
        meta.pr2 = meta.pr;
        addto(meta.pr2.p, 1);
        hdr.a.s = meta.pr2.p + meta.pr2.q;
        hdr.a.h32[15:8] = 0xAB;
        hash(hdr.a.h16, HashAlgorithm.crc16, 16w0, { hdr.a.x, hdr.a.y }, 32w65536);
        hdr.b.setValid();  /* before its field is written: BMv2's setValid (add_header) zeroes an invalid header */
        switch (hdr.a.sw) {
            1: { hdr.b.v = 10; }
            2:
            3: { hdr.b.v = 20; }
            default: { hdr.b.v = 30; }
        }
        hdr.b2 = hdr.b;
        if (hdr.a.sw == 9) {
            hdr.b.setInvalid();
        }
        hdr.st.push_front(1);
        hdr.st[0].setValid();
        hdr.st[0].v = 0x11;
        log_msg("x={} y={}", { hdr.a.x, hdr.a.y });
        assert(hdr.a.sw != 0xEE);
        sm.egress_spec = 1;
    }
}

control Eg(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) { apply { } }

control CC(inout headers hdr, inout metadata meta) { apply { } }

control D(packet_out packet, in headers hdr) {
    apply {
        packet.emit(hdr.a);
        packet.emit(hdr.b);
        packet.emit(hdr.b2);
        packet.emit(hdr.st);
    }
}

V1Switch(P(), VC(), Ing(), Eg(), CC(), D()) main;
