#pragma once
// Damaged copies of a good file, for the bad-input tests: truncated, a byte flipped, a
// dataset deleted or replaced, an attribute changed. The HDF5 edits use the raw C API: the
// project's own module refuses to write such files, which is the point.
#include <cstdint>
#include <string>
#include <vector>

namespace fc::test {

std::vector<std::uint8_t> read_bytes(const std::string& path);
void write_bytes(const std::string& path, const std::vector<std::uint8_t>& bytes);

void truncate_copy(const std::string& from, const std::string& to, std::size_t length);
void flip_copy(const std::string& from, const std::string& to, std::size_t offset);

// Every dataset of an HDF5 file, as absolute paths.
std::vector<std::string> hdf5_datasets(const std::string& path);

// Copies `from` to `to` and edits the copy.
void delete_object_copy(const std::string& from, const std::string& to, const std::string& object);
void replace_dataset_copy(const std::string& from, const std::string& to, const std::string& dataset,
                          const std::vector<unsigned long long>& dims, bool as_float32);
void set_int_attribute_copy(const std::string& from, const std::string& to, const std::string& object,
                            const std::string& name, const std::vector<long long>& values);
void set_string_attribute_copy(const std::string& from, const std::string& to, const std::string& object,
                               const std::string& name, const std::string& value);

}  // namespace fc::test
