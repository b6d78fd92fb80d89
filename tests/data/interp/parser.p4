/* Parser paths: select on values, masks, ranges and tuples, a header stack loop, lookahead,
 * verify, explicit reject and no-match. Ingress reports what the parser saw in `report`. */
#include <core.p4>
#include <v1model.p4>

error { BadN }

header h0_t {
    bit<8> kind;
    bit<8> n;
}

header item_t {
    bit<8> v;
}

header report_t {
    bit<8> err;
    bit<8> items;
    bit<8> peek;
}

struct metadata {
    bit<8> peek;
}

struct headers {
    h0_t      h0;
    item_t[3] items;
    report_t  report;
}

parser P(packet_in packet, out headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    state start {
        packet.extract(hdr.h0);
        transition select(hdr.h0.kind, hdr.h0.n) {
            (1, _): parse_items;
            (0x20 &&& 0xF0, _): peek;
            (5 .. 9, _): reject;
            (0xAA, 7): accept;
            (0xAA, _): check_n;
        }
    }
    state parse_items {
        packet.extract(hdr.items.next);
        transition select(hdr.items.last.v) {
            0: accept;
            default: parse_items;
        }
    }
    state peek {
        meta.peek = packet.lookahead<bit<8>>();
        transition accept;
    }
    state check_n {
        verify(hdr.h0.n == 7, error.BadN);
        transition accept;
    }
}

control VC(inout headers hdr, inout metadata meta) { apply { } }

control Ing(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    apply {
        hdr.report.setValid();
        if (sm.parser_error == error.NoError) {
            hdr.report.err = 0;
        } else if (sm.parser_error == error.PacketTooShort) {
            hdr.report.err = 1;
        } else if (sm.parser_error == error.NoMatch) {
            hdr.report.err = 2;
        } else if (sm.parser_error == error.StackOutOfBounds) {
            hdr.report.err = 3;
        } else if (sm.parser_error == error.BadN) {
            hdr.report.err = 4;
        } else {
            hdr.report.err = 255;
        }
        hdr.report.items = 0;
        if (hdr.items[0].isValid()) { hdr.report.items = hdr.report.items + 1; }
        if (hdr.items[1].isValid()) { hdr.report.items = hdr.report.items + 1; }
        if (hdr.items[2].isValid()) { hdr.report.items = hdr.report.items + 1; }
        hdr.report.peek = meta.peek;
        sm.egress_spec = 1;
    }
}

control Eg(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) { apply { } }

control CC(inout headers hdr, inout metadata meta) { apply { } }

control D(packet_out packet, in headers hdr) {
    apply {
        packet.emit(hdr.report);
        packet.emit(hdr.h0);
        packet.emit(hdr.items);
    }
}

V1Switch(P(), VC(), Ing(), Eg(), CC(), D()) main;
