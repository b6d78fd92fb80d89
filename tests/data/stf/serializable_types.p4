// Serializable enums and type definitions where the control plane meets them: table keys, action
// parameters and a register of enum cells (p4c 1.2.5 compiles `register<enum>` for BMv2); a member
// where its bit<8> is expected converts implicitly (P4 spec 8.11.2, as p4c takes it).
#include <core.p4>
#include <v1model.p4>

enum bit<8> Color { RED = 1, GREEN = 2, BLUE = 200 }
type bit<16> tag_t;

header h_t {
    Color   c;
    tag_t   tag;
    bit<8>  v;
    Color   prev;
}

struct headers_t { h_t h; }
struct meta_t { }

parser SParser(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.h); transition accept; }
}

control SVerify(inout headers_t hdr, inout meta_t meta) { apply { } }

control SIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    register<Color>(4) last;
    action paint(Color c, bit<8> v) { hdr.h.c = c; hdr.h.v = v; sm.egress_spec = 2; }
    action keep() { sm.egress_spec = 1; }
    table by_color {
        key = { hdr.h.c: exact; hdr.h.tag: exact; }
        actions = { paint; keep; }
        default_action = keep();
    }
    apply {
        last.read(hdr.h.prev, 0);
        last.write(0, hdr.h.c);
        by_color.apply();
        if (hdr.h.v == Color.GREEN) { hdr.h.v = Color.BLUE; }
    }
}

control SEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control SCompute(inout headers_t hdr, inout meta_t meta) { apply { } }
control SDeparser(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.h); } }

V1Switch(SParser(), SVerify(), SIngress(), SEgress(), SCompute(), SDeparser()) main;
