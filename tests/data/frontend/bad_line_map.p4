// expect 11:9 nosuch_after_comment: declaration not found
#include <v1model.p4>
#define WIDTH 8
/* a comment
   spanning
   lines */
control C(inout standard_metadata_t sm) {
    apply {
        bit<WIDTH> x = 1; // a macro used in a type
        x = x + 1;
        nosuch_after_comment = x;
    }
}
