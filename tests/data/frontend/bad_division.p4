// expect 6:13 unsupported: / on non-constant values
#include <v1model.p4>
control C(inout standard_metadata_t sm) {
    apply {
        bit<32> x = sm.packet_length;
        x = x / 3;
    }
}
