package node

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/rangesm"
	"github.com/shaledb/shale/storage"
)

// backupServer serves the Backup service (api/kvpb/backup.proto): the
// node's half of backup and restore. The coordinator is the client
// (client/backup.go); docs/backup.md describes the whole procedure.
type backupServer struct {
	kvpb.UnimplementedBackupServer
	n *Node
}

// maxManifestBytes bounds WriteFile and ReadFile, which carry manifests.
const maxManifestBytes = 16 << 20

// entriesPerMessage bounds a ReadEntries message (bytes of keys and
// values), well below the gRPC message limit.
const entriesPerMessage = 1 << 20

// ExportRange writes one range's span as of one timestamp to an SST: the
// request's read_timestamp, or when it has none a fresh one from the
// node's timestamp source (so the backup holds every write acknowledged
// before it began). A span with nothing to export writes no file and
// answers zero entries and no digest. It reads through the KV service's own Scan, page by
// page at that timestamp, so the export is served exactly as a client's
// scan would be: by the leader, closing the timestamp on the range first
// when needed, refused below the GC threshold.
func (s *backupServer) ExportRange(ctx context.Context, req *kvpb.ExportRangeRequest) (*kvpb.ExportRangeResponse, error) {
	const op = "ExportRange"
	if len(req.GetEndKey()) > 0 && bytes.Compare(req.GetStartKey(), req.GetEndKey()) >= 0 {
		return nil, status.Errorf(codes.InvalidArgument, "%s: empty or inverted span [%q, %q)", op, clip(req.GetStartKey()), clip(req.GetEndKey()))
	}
	path, tmp, err := s.n.newBackupFile(op, req.GetDir(), req.GetFile())
	if err != nil {
		return nil, err
	}
	w, err := storage.NewSSTWriter(tmp, nil)
	if err != nil {
		return nil, fileError(op, err)
	}
	wb := openWriteback(tmp)
	defer func() {
		wb.close()
		w.Close()
		os.Remove(tmp)
	}()
	var readTS *kvpb.Timestamp
	if req.GetHeader().GetReadTimestamp() == nil {
		// The first range of a backup is read at a fresh timestamp, not at
		// its frontier: other ranges may hold acknowledged writes above
		// that, which the later ranges, read at it, would miss.
		ts, err := s.n.timestamps.Now(ctx)
		if err != nil {
			return nil, unavailable(100*time.Millisecond, "%s: no timestamp to read at: %v", op, err)
		}
		readTS = rangesm.TimestampProto(ts)
	}
	at := newExportPager(&kvServer{n: s.n}, req, readTS)
	at.pace = newExportPacer(req.GetBytesPerSecond())
	var since *exportPager
	if req.GetSince() != nil {
		since = newExportPager(&kvServer{n: s.n}, req, req.GetSince())
	}
	var entries, dataBytes uint64
	var val []byte
	var seen uint64
	put := func(key, value []byte, deleted bool) error {
		seen++
		if s.n.dropExportEntry(seen - 1) { // a planted bug of the fault suite's test build (faults_on.go)
			return nil
		}
		val = encodeBackupValue(val, value, deleted)
		entries++
		dataBytes += uint64(len(key) + len(value))
		if err := w.Put(key, val); err != nil {
			return err
		}
		wb.add(len(key) + len(val))
		return nil
	}
	if err := exportEntries(ctx, at, since, put); err != nil {
		return nil, err
	}
	if entries == 0 {
		// Nothing to back up here (no key at the timestamp, or for an
		// incremental export no change since): no file, since an SST holds
		// at least one entry. The answer says so with no digest; the
		// client records no file for this part (docs/formats.md).
		return &kvpb.ExportRangeResponse{Header: at.header}, nil
	}
	if _, err := w.Finish(); err != nil {
		return nil, fileError(op, err)
	}
	if err := installFile(tmp, path, false); err != nil {
		return nil, fileError(op, err)
	}
	sum, size, err := fileDigest(path)
	if err != nil {
		return nil, fileError(op, err)
	}
	return &kvpb.ExportRangeResponse{Header: at.header, Entries: entries, Bytes: size, Sha256: sum, DataBytes: dataBytes}, nil
}

// exportEntries feeds put with the entries of an export: every key of at
// (a full backup), or, with since, a merge of the two reads that keeps what
// changed: a key whose version at the backup's timestamp is newer than
// since (written since), and a key present at since and absent now
// (deleted since).
func exportEntries(ctx context.Context, at, since *exportPager, put func(key, value []byte, deleted bool) error) error {
	a, err := at.next(ctx)
	if err != nil {
		return err
	}
	if since == nil {
		for ; a != nil; a, err = at.next(ctx) {
			if err := put(a.GetKey(), a.GetValue(), false); err != nil {
				return status.Errorf(codes.Internal, "ExportRange: writing the file: %v", err)
			}
		}
		return err
	}
	if at.readTS == nil || (at.readTS.GetWallNanos() == 0 && at.readTS.GetLogical() == 0) {
		return status.Errorf(codes.FailedPrecondition, "ExportRange: an incremental export needs versioned reads, which this node does not serve")
	}
	b, err := since.next(ctx)
	if err != nil {
		return err
	}
	for a != nil || b != nil {
		var c int
		switch {
		case a == nil:
			c = 1
		case b == nil:
			c = -1
		default:
			c = bytes.Compare(a.GetKey(), b.GetKey())
		}
		var werr error
		switch {
		case c < 0: // new since
			werr = put(a.GetKey(), a.GetValue(), false)
		case c > 0: // gone since
			werr = put(b.GetKey(), nil, true)
		case !proto.Equal(a.GetVersion(), b.GetVersion()): // rewritten since
			werr = put(a.GetKey(), a.GetValue(), false)
		}
		if werr != nil {
			return status.Errorf(codes.Internal, "ExportRange: writing the file: %v", werr)
		}
		if c <= 0 {
			if a, err = at.next(ctx); err != nil {
				return err
			}
		}
		if c >= 0 {
			if b, err = since.next(ctx); err != nil {
				return err
			}
		}
	}
	return nil
}

// exportPager reads a span page by page through the KV service's Scan, at
// one timestamp: the one it is given, or the one the first page was served
// at.
type exportPager struct {
	kv     *kvServer
	req    *kvpb.ScanRequest
	page   []*kvpb.KeyValue
	more   bool
	header *kvpb.ResponseHeader
	readTS *kvpb.Timestamp
	// pace, when set, holds the pages read to the export's rate.
	pace *exportPacer
}

func newExportPager(kv *kvServer, req *kvpb.ExportRangeRequest, at *kvpb.Timestamp) *exportPager {
	h := proto.Clone(req.GetHeader()).(*kvpb.RequestHeader)
	if h == nil {
		h = &kvpb.RequestHeader{}
	}
	h.ReadConsistency = kvpb.ReadConsistency_READ_CONSISTENCY_LINEARIZABLE
	if at != nil {
		h.ReadTimestamp = at
	}
	return &exportPager{kv: kv, more: true, readTS: at,
		req: &kvpb.ScanRequest{Header: h, StartKey: req.GetStartKey(), EndKey: req.GetEndKey()}}
}

// next returns the next entry, nil at the end of the span.
func (p *exportPager) next(ctx context.Context) (*kvpb.KeyValue, error) {
	for len(p.page) == 0 {
		if !p.more {
			return nil, nil
		}
		if err := p.pace.wait(ctx); err != nil {
			return nil, err
		}
		resp, err := p.kv.Scan(ctx, p.req)
		if err != nil {
			return nil, err
		}
		if p.pace != nil {
			for _, kv := range resp.GetKvs() {
				p.pace.add(len(kv.GetKey()) + len(kv.GetValue()))
			}
		}
		if p.header == nil {
			p.header = resp.GetHeader()
			if p.readTS == nil {
				p.readTS = resp.GetHeader().GetReadTimestamp()
				p.req.Header.ReadTimestamp = p.readTS
			}
		}
		p.page = resp.GetKvs()
		p.more = resp.GetMore()
		if p.more {
			rk := resp.GetResumeKey()
			if len(p.req.EndKey) > 0 && bytes.Compare(rk, p.req.EndKey) >= 0 {
				p.more = false // the range ended before the span did
			}
			p.req.StartKey = rk
		}
	}
	kv := p.page[0]
	p.page = p.page[1:]
	return kv, nil
}

// WriteFile writes a manifest, whole or not at all.
func (s *backupServer) WriteFile(_ context.Context, req *kvpb.WriteFileRequest) (*kvpb.WriteFileResponse, error) {
	const op = "WriteFile"
	if len(req.GetData()) > maxManifestBytes {
		return nil, status.Errorf(codes.InvalidArgument, "%s: %d bytes, over the limit of %d", op, len(req.GetData()), maxManifestBytes)
	}
	path, tmp, err := s.n.newBackupFile(op, req.GetDir(), req.GetFile())
	if err != nil {
		return nil, err
	}
	if err := writeSynced(tmp, req.GetData()); err != nil {
		os.Remove(tmp)
		return nil, fileError(op, err)
	}
	if err := installFile(tmp, path, req.GetExclusive()); err != nil {
		return nil, fileError(op, err)
	}
	return &kvpb.WriteFileResponse{}, nil
}

func writeSynced(path string, data []byte) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// ReadFile returns a manifest.
func (s *backupServer) ReadFile(_ context.Context, req *kvpb.ReadFileRequest) (*kvpb.ReadFileResponse, error) {
	const op = "ReadFile"
	path, err := s.n.backupPath(op, req.GetDir(), req.GetFile())
	if err != nil {
		return nil, err
	}
	st, err := os.Stat(path)
	if err != nil {
		return nil, fileError(op, err)
	}
	if st.Size() > maxManifestBytes {
		return nil, status.Errorf(codes.InvalidArgument, "%s: %s is %d bytes, over the limit of %d", op, req.GetFile(), st.Size(), maxManifestBytes)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fileError(op, err)
	}
	return &kvpb.ReadFileResponse{Data: data}, nil
}

// VerifyFile checks a backup file's digest and reads every entry back.
// What is wrong with the file is an answer (problem), not an error; errors
// are for requests that could not be served.
func (s *backupServer) VerifyFile(_ context.Context, req *kvpb.VerifyFileRequest) (*kvpb.VerifyFileResponse, error) {
	const op = "VerifyFile"
	path, err := s.n.backupPath(op, req.GetDir(), req.GetFile())
	if err != nil {
		return nil, err
	}
	sum, size, err := fileDigest(path)
	if os.IsNotExist(err) {
		return &kvpb.VerifyFileResponse{Problem: "missing: " + req.GetFile()}, nil
	} else if err != nil {
		return nil, fileError(op, err)
	}
	resp := &kvpb.VerifyFileResponse{Bytes: size, Sha256: sum}
	if len(req.GetSha256()) > 0 && !bytes.Equal(sum, req.GetSha256()) {
		resp.Problem = "checksum mismatch: the file's SHA-256 is not the manifest's"
		return resp, nil
	}
	n, err := readBackupFile(path, s.scratchDir(), func([]byte, []byte, bool) error { return nil })
	resp.Entries = n
	if err != nil {
		resp.Problem = err.Error()
	}
	return resp, nil
}

// ReadEntries streams a backup file's entries once its digest matches.
func (s *backupServer) ReadEntries(req *kvpb.ReadEntriesRequest, stream kvpb.Backup_ReadEntriesServer) error {
	const op = "ReadEntries"
	path, err := s.n.backupPath(op, req.GetDir(), req.GetFile())
	if err != nil {
		return err
	}
	sum, _, err := fileDigest(path)
	if err != nil {
		return fileError(op, err)
	}
	if len(req.GetSha256()) == 0 {
		return status.Errorf(codes.InvalidArgument, "%s: the file's SHA-256 from the manifest is required", op)
	}
	if !bytes.Equal(sum, req.GetSha256()) {
		return status.Errorf(codes.DataLoss, "%s: %s is corrupt: its SHA-256 is not the manifest's", op, req.GetFile())
	}
	msg := &kvpb.ReadEntriesResponse{}
	size := 0
	flush := func() error {
		if len(msg.Entries) == 0 {
			return nil
		}
		err := stream.Send(msg)
		msg, size = &kvpb.ReadEntriesResponse{}, 0
		return err
	}
	_, err = readBackupFile(path, s.scratchDir(), func(k, v []byte, deleted bool) error {
		msg.Entries = append(msg.Entries, &kvpb.BackupEntry{Key: k, Value: v, Deleted: deleted})
		if size += len(k) + len(v); size >= entriesPerMessage {
			return flush()
		}
		return stream.Context().Err()
	})
	if err != nil {
		if st, ok := status.FromError(err); ok && st.Code() != codes.Unknown {
			return err
		}
		return status.Errorf(codes.DataLoss, "%s: %v", op, err)
	}
	return flush()
}

// scratchDir is where backup files are read back: in the node's own data
// directory, not the shared backup directory.
func (s *backupServer) scratchDir() string {
	return filepath.Join(s.n.cfg.DataDir, "scratch")
}
