// expect 3:1 unsupported: function declarations
#include <core.p4>
bit<8> twice(in bit<8> x) {
    return x + x;
}
