/* included by bad_in_include.p4 */
header broken_t {
    bit<8> a;
    undefined_t b;
}
