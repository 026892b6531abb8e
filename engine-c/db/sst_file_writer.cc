#include "db/sst_file_writer.h"

#include "db/filter_key.h"
#include "table/filter_policy.h"
#include "table/table_builder.h"
#include "util/env.h"

namespace shale {

SstFileWriter::SstFileWriter(Env* env, std::string path)
    : env_(env), path_(std::move(path)), icmp_(BytewiseComparator()) {}

SstFileWriter::~SstFileWriter() {
  if (finished_) return;
  if (builder_ != nullptr && !builder_finished_) builder_->Abandon();
  builder_.reset();
  if (file_ != nullptr) {
    file_->Close();
    env_->RemoveFile(path_);
  }
}

Status SstFileWriter::Open(const Options& options, const std::string& path,
                           std::unique_ptr<SstFileWriter>* writer) {
  writer->reset();
  Status s = options.Validate();
  if (!s.ok()) return s;
  Env* env = options.env != nullptr ? options.env : Env::Default();
  std::unique_ptr<SstFileWriter> w(new SstFileWriter(env, path));
  w->filter_policy_ = NewInternalFilterPolicy(options);
  w->table_options_.comparator = &w->icmp_;
  w->table_options_.filter_policy = w->filter_policy_.get();
  w->table_options_.block_size = options.block_size;
  w->table_options_.block_restart_interval = options.block_restart_interval;
  w->table_options_.compression = options.compression;
  s = env->NewWritableFile(path, &w->file_);
  if (!s.ok()) return s;
  w->builder_ =
      std::make_unique<TableBuilder>(w->table_options_, w->file_.get());
  w->builder_->SetUserProperty(kExternalSstProperty, kExternalSstVersion);
  *writer = std::move(w);
  return Status::OK();
}

Status SstFileWriter::Put(const Slice& key, const Slice& value) {
  if (builder_finished_) {
    return Status::InvalidArgument("sst writer: already finished");
  }
  if (has_last_key_ && icmp_.CompareUserKeys(key, last_key_) <= 0) {
    return Status::InvalidArgument("sst writer: key '" + EscapeKey(key) +
                                   "' does not sort after the previous key '" +
                                   EscapeKey(last_key_) + "'");
  }
  scratch_.clear();
  AppendInternalKey(&scratch_, ParsedInternalKey(key, 0, kTypeValue));
  builder_->Add(scratch_, value);
  last_key_.assign(key.data(), key.size());
  has_last_key_ = true;
  return builder_->status();
}

Status SstFileWriter::DeleteRange(const Slice& begin, const Slice& end) {
  if (builder_finished_) {
    return Status::InvalidArgument("sst writer: already finished");
  }
  const int r = icmp_.CompareUserKeys(begin, end);
  if (r > 0) {
    return Status::InvalidArgument("sst writer: DeleteRange begin '" +
                                   EscapeKey(begin) + "' sorts after end '" +
                                   EscapeKey(end) + "'");
  }
  if (r == 0) return Status::OK();
  scratch_.clear();
  AppendInternalKey(&scratch_, ParsedInternalKey(begin, 0, kTypeRangeDeletion));
  builder_->AddRangeTombstone(scratch_, end);
  return builder_->status();
}

Status SstFileWriter::Finish(uint64_t* file_size) {
  if (builder_finished_) {
    return Status::InvalidArgument("sst writer: already finished");
  }
  if (builder_->NumEntries() == 0 && builder_->NumRangeTombstones() == 0) {
    return Status::InvalidArgument("sst writer: the file has no entries");
  }
  builder_finished_ = true;
  Status s = builder_->Finish();
  if (s.ok()) s = file_->Sync();
  if (s.ok()) s = file_->Close();
  if (!s.ok()) return s;
  *file_size = builder_->FileSize();
  finished_ = true;
  return Status::OK();
}

}  // namespace shale
