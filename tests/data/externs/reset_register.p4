// reset_register<T>, declared by the program (v1model.p4 has no such extern), for the test-only extern of
// tests/reset_register_extern.py: a register whose cell a read() also resets to zero. A packet with op 1 writes
// `value` into cell `index`; op 2 reads that cell into `value` (and so clears it); op 3 does both, read first.
#include <core.p4>
#include <v1model.p4>

extern reset_register<T> {
    reset_register(bit<32> size);
    void read(out T result, in bit<32> index);
    void write(in bit<32> index, in T value);
}

header ethernet_t { bit<48> dst; bit<48> src; bit<16> type; }
header h_t { bit<8> op; bit<8> index; bit<16> value; }
struct headers_t { ethernet_t eth; h_t h; }
struct meta_t { }

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.eth); pkt.extract(hdr.h); transition accept; }
}
control VC(inout headers_t hdr, inout meta_t meta) { apply { } }
control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    reset_register<bit<16>>(8) taken;
    apply {
        sm.egress_spec = 1;
        bit<16> old = 0;
        if (hdr.h.op == 2 || hdr.h.op == 3) {
            taken.read(old, (bit<32>)hdr.h.index);
        }
        if (hdr.h.op == 1 || hdr.h.op == 3) {
            taken.write((bit<32>)hdr.h.index, hdr.h.value);
        }
        hdr.h.value = old;
    }
}
control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.eth); pkt.emit(hdr.h); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
