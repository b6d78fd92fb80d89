// expect 6:21 concatenation needs bit<W>/int<W> operands
#include <v1model.p4>
control C(inout standard_metadata_t sm) {
    apply {
        bit<8> y = 1;
        bit<16> z = 1 ++ y;
    }
}
