// expect 6:13 x / 3: Cannot operate on signed values
#include <v1model.p4>
control C(inout standard_metadata_t sm) {
    apply {
        int<32> x = (int<32>)sm.packet_length;
        x = x / 3;
    }
}
