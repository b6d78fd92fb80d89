/* Meters: an indirect meter indexed by the packet, and a direct meter on a table. The
 * colors (0 green, 1 yellow, 2 red) are written into the packet. */
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> idx;
    bit<8> color;
    bit<8> dcolor;
}

struct metadata { }

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
    meter(4, MeterType.packets) m;
    direct_meter<bit<8>>(MeterType.packets) dm;

    action police() { dm.read(hdr.h.dcolor); }
    table t {
        key = { hdr.h.idx: exact; }
        actions = { police; NoAction; }
        meters = dm;
        default_action = NoAction();
    }
    apply {
        m.execute_meter((bit<32>)hdr.h.idx, hdr.h.color);
        t.apply();
        sm.egress_spec = 1;
    }
}

control Eg(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) { apply { } }

control CC(inout headers hdr, inout metadata meta) { apply { } }

control D(packet_out packet, in headers hdr) {
    apply { packet.emit(hdr.h); }
}

V1Switch(P(), VC(), Ing(), Eg(), CC(), D()) main;
