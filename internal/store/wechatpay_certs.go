package store

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// WeChat Pay platform certificates (migration 020): what the last download
// of /v3/certificates that was believed listed (internal/wechatcerts), per
// merchant, shared by every gateway and worker. A process loads the rows
// not expired at start, beside the configured certificates, so that it
// verifies at once with a certificate WeChat Pay switched to while it was
// down, and holds it while WeChat Pay cannot be reached.

// WeChatPayCertificate is one platform certificate of a merchant.
type WeChatPayCertificate struct {
	// Serial is the certificate's serial as Wechatpay-Serial names it
	// (upper-case hex).
	Serial string
	// PEM is the certificate, decrypted.
	PEM string
	// EffectiveAt and ExpiresAt are the certificate's own validity.
	EffectiveAt, ExpiresAt time.Time
	// DownloadedAt is when the last download that listed it was believed.
	DownloadedAt time.Time
}

// WeChatPayCertificates returns merchant mchID's stored certificates not
// expired at now, by serial.
func (s *Store) WeChatPayCertificates(ctx context.Context, mchID string, now time.Time) ([]WeChatPayCertificate, error) {
	rows, err := s.sql.QueryContext(ctx, `SELECT serial_no, pem, effective_at, expires_at, downloaded_at
FROM wechatpay_certificates WHERE mchid = ? AND expires_at >= ? ORDER BY serial_no`, mchID, now.UTC())
	if err != nil {
		return nil, fmt.Errorf("error reading the WeChat Pay platform certificates of %s: %w", mchID, err)
	}
	defer rows.Close()
	var out []WeChatPayCertificate
	for rows.Next() {
		var c WeChatPayCertificate
		if err := rows.Scan(&c.Serial, &c.PEM, &c.EffectiveAt, &c.ExpiresAt, &c.DownloadedAt); err != nil {
			return nil, fmt.Errorf("error reading the WeChat Pay platform certificates of %s: %w", mchID, err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("error reading the WeChat Pay platform certificates of %s: %w", mchID, err)
	}
	return out, nil
}

// SaveWeChatPayCertificates records certs as merchant mchID's list, as a
// download believed at at gave it: those not expired at at are stored (a
// serial stored already keeps the later downloaded_at), and in the same
// transaction the merchant's rows that this list no longer names are
// deleted, unless a later download stored them, as are the rows expired
// at at. Two processes saving at once: the later download's list wins,
// and a row of the earlier one that the later dropped is deleted by the
// next save. An empty list changes nothing.
func (s *Store) SaveWeChatPayCertificates(ctx context.Context, mchID string, certs []WeChatPayCertificate, at time.Time) error {
	at = at.UTC()
	var keep []WeChatPayCertificate
	for _, c := range certs {
		if !c.ExpiresAt.Before(at) {
			keep = append(keep, c)
		}
	}
	if len(keep) == 0 {
		return nil
	}
	err := retryTransient(ctx, func() error { return s.saveWeChatPayCertificates(ctx, mchID, keep, at) })
	if err != nil {
		return fmt.Errorf("error storing the WeChat Pay platform certificates of %s: %w", mchID, err)
	}
	return nil
}

func (s *Store) saveWeChatPayCertificates(ctx context.Context, mchID string, certs []WeChatPayCertificate, at time.Time) error {
	tx, err := s.sql.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	del := []any{mchID, at}
	ins := make([]any, 0, 6*len(certs))
	for _, c := range certs {
		del = append(del, c.Serial)
		ins = append(ins, mchID, c.Serial, c.PEM, c.EffectiveAt.UTC(), c.ExpiresAt.UTC(), at)
	}
	del = append(del, at)
	if _, err := tx.ExecContext(ctx, `DELETE FROM wechatpay_certificates WHERE mchid = ?
  AND ((downloaded_at <= ? AND serial_no NOT IN (?`+strings.Repeat(",?", len(certs)-1)+`)) OR expires_at < ?)`, del...); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO wechatpay_certificates (mchid, serial_no, pem, effective_at, expires_at, downloaded_at)
VALUES (?, ?, ?, ?, ?, ?)`+strings.Repeat(", (?, ?, ?, ?, ?, ?)", len(certs)-1)+`
ON DUPLICATE KEY UPDATE pem = VALUES(pem), effective_at = VALUES(effective_at), expires_at = VALUES(expires_at),
  downloaded_at = GREATEST(downloaded_at, VALUES(downloaded_at))`, ins...); err != nil {
		return err
	}
	return tx.Commit()
}
