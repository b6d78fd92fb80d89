// expect 6:13 slice [8:0] out of range for bit<8>
#include <v1model.p4>
control C(inout standard_metadata_t sm) {
    apply {
        bit<8> x = 3;
        x = x[8:0];
    }
}
