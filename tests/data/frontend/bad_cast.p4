// expect 6:21 cannot cast bit<8> to int<16>
#include <v1model.p4>
control C(inout standard_metadata_t sm) {
    apply {
        bit<8> x = 1;
        int<16> y = (int<16>)x;
    }
}
