/* Packet replication engine: multicast, I2E and E2E clones, resubmit and recirculate with
 * preserved metadata, digests, truncate. `op` in the packet picks the behaviour; egress
 * stamps instance_type, egress_rid and egress_port into the header. */
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> op;
    bit<8> count;
    bit<8> itype;
    bit<8> rid;
    bit<8> port;
    bit<8> loops;
}

struct learn_t {
    bit<8> count;
    bit<9> port;
}

struct metadata {
    @field_list(1) bit<8> loops;
    bit<8> scratch;
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
    apply {
        sm.egress_spec = 1;
        if (hdr.h.op == 1) {
            sm.mcast_grp = 1;
        } else if (hdr.h.op == 2) {
            clone(CloneType.I2E, 5);
            hdr.h.count = 0x55;
        } else if (hdr.h.op == 4) {
            if (sm.instance_type == 6) {
                hdr.h.loops = meta.loops;
                hdr.h.count = meta.scratch;
            } else {
                meta.loops = 9;
                meta.scratch = 0x44;
                resubmit_preserving_field_list(1);
            }
        } else if (hdr.h.op == 6) {
            digest<learn_t>(1, { hdr.h.count, sm.ingress_port });
            mark_to_drop(sm);
        } else if (hdr.h.op == 7) {
            truncate(3);
        }
    }
}

control Eg(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    apply {
        if (hdr.h.op == 3 && hdr.h.count < 3) {
            hdr.h.count = hdr.h.count + 1;
            meta.loops = meta.loops + 1;
            recirculate_preserving_field_list(1);
        }
        if (hdr.h.op == 5 && sm.instance_type == 0) {
            clone(CloneType.E2E, 6);
        }
        if (hdr.h.op == 3) {
            hdr.h.loops = meta.loops;
        }
        if (hdr.h.op == 1 && sm.egress_port == 3) {
            mark_to_drop(sm);
        }
        hdr.h.itype = (bit<8>)sm.instance_type;
        hdr.h.rid = (bit<8>)sm.egress_rid;
        hdr.h.port = (bit<8>)sm.egress_port;
    }
}

control CC(inout headers hdr, inout metadata meta) { apply { } }

control D(packet_out packet, in headers hdr) {
    apply { packet.emit(hdr.h); }
}

V1Switch(P(), VC(), Ing(), Eg(), CC(), D()) main;
