// Generic structs and headers (`struct S<T>`), specialized as p4c does (S<bit<8>> is S_bit8): a
// generic header parsed and emitted, generic metadata nested in a generic struct, and struct
// initializers typed from the declaration they initialize.
#include <core.p4>
#include <v1model.p4>

header pair_h<A, B> { A first; B second; }
struct box_t<T> { T value; bit<8> tag; }
struct outer_t<T> { box_t<T> inner; T extra; }

struct headers_t { pair_h<bit<8>, bit<16>> p; }
struct meta_t { outer_t<bit<16>> o; }

parser GParser(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.p); transition accept; }
}

control GVerify(inout headers_t hdr, inout meta_t meta) { apply { } }

control GIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        box_t<bit<8>> b = { value = hdr.p.first, tag = 3 };
        meta.o = { inner = { value = hdr.p.second, tag = b.tag }, extra = 0x0100 };
        hdr.p.first = b.value + b.tag;
        hdr.p.second = meta.o.inner.value + meta.o.extra + (bit<16>)meta.o.inner.tag;
        sm.egress_spec = 1;
    }
}

control GEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control GCompute(inout headers_t hdr, inout meta_t meta) { apply { } }
control GDeparser(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.p); } }

V1Switch(GParser(), GVerify(), GIngress(), GEgress(), GCompute(), GDeparser()) main;
