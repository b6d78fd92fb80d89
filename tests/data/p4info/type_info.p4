// Serializable enums wherever P4Info describes a value: exact keys, action parameters, a
// controller header field, a register and a digest struct; p4c lists them in type_info, and in
// the digest also a plain enum and an error.
#include <core.p4>
#include <v1model.p4>
enum bit<8> Color { RED = 1, GREEN = 2, BLUE = 200 }
@foo enum bit<16> Kind { A = 10, B = 0xABCD }
enum Plain { X, Y }
header h_t { Color c; Kind k; bit<8> f; }
@controller_header("packet_in") header pin_t { Color c; bit<7> pad; bit<1> z; }
struct headers { h_t h; pin_t pin; }
struct learn_t { Color c; bit<8> f; Plain p; error e; }
struct meta_t { learn_t l; }
parser P(packet_in p, out headers hdr, inout meta_t m, inout standard_metadata_t sm) {
    state start { p.extract(hdr.h); transition accept; }
}
control VC(inout headers hdr, inout meta_t m) { apply { } }
control I(inout headers hdr, inout meta_t m, inout standard_metadata_t sm) {
    action set(Color c, bit<8> v) { hdr.h.c = c; hdr.h.f = v; }
    action learn() { m.l.c = hdr.h.c; m.l.f = hdr.h.f; m.l.p = Plain.Y; m.l.e = error.NoMatch; digest<learn_t>(1, m.l); }
    register<Color>(4) last;
    table t {
        key = { hdr.h.c: exact; hdr.h.k: exact; }
        actions = { set; learn; }
        default_action = set(Color.GREEN, 3);
    }
    apply { t.apply(); last.write(0, hdr.h.c); }
}
control E(inout headers hdr, inout meta_t m, inout standard_metadata_t sm) { apply { } }
control CC(inout headers hdr, inout meta_t m) { apply { } }
control D(packet_out p, in headers hdr) { apply { p.emit(hdr.h); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
