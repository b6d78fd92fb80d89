// expect 6:16 x: duplicate declaration
#include <v1model.p4>
control C(inout standard_metadata_t sm) {
    apply {
        bit<8> x = 1;
        bit<8> x = 2;
    }
}
