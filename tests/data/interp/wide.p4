/* Wide bit<W> fields (stored in 32-bit chunks by the embedded target): slices inside one
 * chunk, across chunks and in a narrower top chunk, slice writes, whole-value copies and
 * arithmetic, a field that is not on a byte boundary, saturating adds into a lane. */
#include <core.p4>
#include <v1model.p4>

header in_t {
    bit<4>   pre;   /* puts w off a byte boundary */
    bit<200> w;     /* 7 chunks, the top one 8 bits wide */
    bit<4>   post;
    bit<256> v;     /* byte-aligned whole chunks: 8 lanes of 32 bits */
}

header out_t {
    bit<256> v;     /* v with lanes rewritten */
    bit<200> w2;    /* w with w[100:37] = v[63:0] */
    bit<32>  s0;    /* v[255:224] */
    bit<16>  s1;    /* v[47:32] */
    bit<48>  s2;    /* v[79:32] */
    bit<8>   top;   /* w[199:192] */
    bit<8>   same;  /* 1 if w2 == w */
    bit<200> inc;   /* w + 1 */
}

struct headers_t { in_t i; out_t o; }
struct meta_t { }

parser WideParser(packet_in packet, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start { packet.extract(hdr.i); transition accept; }
}

control NoVerify(inout headers_t hdr, inout meta_t meta) { apply { } }

control WideIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        hdr.o.setValid();
        hdr.o.s0 = hdr.i.v[255:224];
        hdr.o.s1 = hdr.i.v[47:32];
        hdr.o.s2 = hdr.i.v[79:32];
        hdr.o.top = hdr.i.w[199:192];
        bit<200> t = hdr.i.w;
        t[100:37] = hdr.i.v[63:0];
        hdr.o.w2 = t;
        hdr.o.same = (t == hdr.i.w) ? 8w1 : 8w0;
        hdr.o.inc = hdr.i.w + 1;
        hdr.o.v = hdr.i.v;
        hdr.o.v[31:0] = hdr.i.v[255:224] |+| hdr.i.v[31:0];
        hdr.o.v[255:224] = 7;
        hdr.o.v[131:124] = 0xAB;
        sm.egress_spec = 2;
    }
}

control NoEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control NoCompute(inout headers_t hdr, inout meta_t meta) { apply { } }

control WideDeparser(packet_out packet, in headers_t hdr) {
    apply { packet.emit(hdr.i); packet.emit(hdr.o); }
}

V1Switch(WideParser(), NoVerify(), WideIngress(), NoEgress(), NoCompute(), WideDeparser()) main;
