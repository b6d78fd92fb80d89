/* P4 arithmetic semantics: wrap-around bit<8>, two's complement int<8>, saturation,
 * shifts, slices, concatenation, casts. Ingress fills `res` from `in_` and sends it to port 1. */
#include <core.p4>
#include <v1model.p4>

header in_t {
    bit<8> a;
    bit<8> b;
    int<8> c;
    int<8> d;
}

header out_t {
    bit<8>  add;
    bit<8>  sub;
    bit<8>  sadd;
    bit<8>  ssub;
    bit<8>  mul;
    int<8>  iadd;
    int<8>  isub;
    int<8>  isadd;
    int<8>  issub;
    bit<8>  shl3;
    bit<8>  shlv;
    bit<8>  shr2;
    int<8>  ishr1;
    bit<4>  hi;
    bit<4>  lo;
    bit<16> cat;
    bit<8>  neg;
    bit<8>  cmpl;
    int<16> sext;
    bit<16> zext;
    bit<8>  ucast;
    bit<8>  lt;
    bit<8>  ilt;
}

struct metadata { }

struct headers {
    in_t  in_;
    out_t res;
}

parser P(packet_in packet, out headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    state start {
        packet.extract(hdr.in_);
        transition accept;
    }
}

control VC(inout headers hdr, inout metadata meta) { apply { } }

control Ing(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    apply {
        hdr.res.setValid();
        hdr.res.add = hdr.in_.a + hdr.in_.b;
        hdr.res.sub = hdr.in_.a - hdr.in_.b;
        hdr.res.sadd = hdr.in_.a |+| hdr.in_.b;
        hdr.res.ssub = hdr.in_.a |-| hdr.in_.b;
        hdr.res.mul = hdr.in_.a * hdr.in_.b;
        hdr.res.iadd = hdr.in_.c + hdr.in_.d;
        hdr.res.isub = hdr.in_.c - hdr.in_.d;
        hdr.res.isadd = hdr.in_.c |+| hdr.in_.d;
        hdr.res.issub = hdr.in_.c |-| hdr.in_.d;
        hdr.res.shl3 = hdr.in_.a << 3;
        hdr.res.shlv = hdr.in_.a << hdr.in_.b;
        hdr.res.shr2 = hdr.in_.a >> 2;
        hdr.res.ishr1 = hdr.in_.c >> 1;
        hdr.res.hi = hdr.in_.a[7:4];
        hdr.res.lo = hdr.in_.a[3:0];
        hdr.res.cat = hdr.in_.a ++ hdr.in_.b;
        hdr.res.neg = -hdr.in_.a;
        hdr.res.cmpl = ~hdr.in_.a;
        hdr.res.sext = (int<16>)hdr.in_.c;
        hdr.res.zext = (bit<16>)hdr.in_.a;
        hdr.res.ucast = (bit<8>)hdr.in_.c;
        hdr.res.lt = (hdr.in_.a < hdr.in_.b) ? 8w1 : 8w0;
        hdr.res.ilt = (hdr.in_.c < hdr.in_.d) ? 8w1 : 8w0;
        sm.egress_spec = 1;
    }
}

control Eg(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) { apply { } }

control CC(inout headers hdr, inout metadata meta) { apply { } }

control D(packet_out packet, in headers hdr) {
    apply {
        packet.emit(hdr.in_);
        packet.emit(hdr.res);
    }
}

V1Switch(P(), VC(), Ing(), Eg(), CC(), D()) main;
